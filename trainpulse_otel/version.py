"""The package's version (pyproject.toml's): a leaf every module may import, so that none imports the package."""

__version__ = "0.1.0"
