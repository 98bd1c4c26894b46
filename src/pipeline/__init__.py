"""pipeline: recipe-driven data preparation for language-model pretraining."""

__version__ = "0.1.0"
