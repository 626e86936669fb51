"""A regression on scikit-learn's diabetes data: a complete tune-service project to copy."""
