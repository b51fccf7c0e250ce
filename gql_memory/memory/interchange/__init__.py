"""Moving a namespace out and in: the export format (format.py), export (export.py) and the
import of an export (load.py), with its id remapping (ids.py) and --merge's matching
(merge.py). docs/interchange.md describes the format."""
