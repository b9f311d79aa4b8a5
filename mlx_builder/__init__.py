"""mlx-builder: fork-and-patch builds of Apple MLX for long-context attention."""

__version__ = "0.1.0"
