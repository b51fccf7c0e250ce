"""Moving a namespace out and in: the export format (format.py), export (export.py) and the
import of an export (load.py). docs/interchange.md describes the format."""
