"""The directory put first on a W&B program's PYTHONPATH (its ``sitecustomize.py`` is what runs there).
A package only so that it is installed with tune-service; nothing imports it."""
