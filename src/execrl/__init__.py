"""execrl: reinforcement learning from execution feedback for code models."""

__version__ = "0.1.0"
