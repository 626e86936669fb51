"""A small transformer on a generated sequence task: a complete tune-service project to copy."""
