"""A plain Ray Train loop, run unchanged as every trial's DDP job: a complete tune-service project to copy."""
