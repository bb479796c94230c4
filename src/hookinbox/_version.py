"""hookinbox's version, in a leaf module: `hookinbox.__version__` re-exports it, and a module
below the package (`_tracing.py`, naming its tracer) reads it here without importing the
package's front door, which names every layer."""

__version__ = "0.2.0"
