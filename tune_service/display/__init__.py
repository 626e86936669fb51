"""What a running sweep shows its user: the live view (:mod:`tune_service.display.live`)."""

from tune_service.display.live import LiveView

__all__ = ["LiveView"]
