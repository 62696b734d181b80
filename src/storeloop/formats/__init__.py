"""The only code that opens an input file: storeloop's own YAML formats and Timeloop's.

Each format has one typed schema (pydantic, unknown and duplicate keys refused) and one loader that
turns a document into the frozen objects of :mod:`storeloop.ir`; errors name the file, line and
field (:mod:`.yamlio`, :mod:`.validate`). Quantities with units are read by :mod:`.quantities` only.
"""
