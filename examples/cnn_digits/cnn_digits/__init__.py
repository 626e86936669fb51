"""A small CNN on scikit-learn's 8x8 digits images: a complete tune-service project to copy."""
