"""musicgen: symbolic music generation with Performers and stochastic positional encoding."""

__version__ = "0.1.0"
