"""The source stage: the MLX mirror and work trees (git), the patch series,
applying and exporting it, and reading what an MLX tree says about itself."""
