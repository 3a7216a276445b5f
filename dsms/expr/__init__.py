"""CQL expressions compiled to vectorised numpy operations over columnar batches (see ``compile.py``)."""
