"""Benchmark workers: standalone scripts, one framework per process.

`mlx-builder bench` runs ``mlx_worker.py`` with the Python of a venv holding
one MLX wheel and ``torch_worker.py`` with a Python that has PyTorch; MLX and
torch abort when imported into one process. A worker reads its job as JSON
(argv[1]) and prints JSON lines (see ``_common``).
"""
