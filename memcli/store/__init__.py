"""The memory store on disk: documents, CURRENT, signatures, atomic writes, lock."""

from memcli.store.folder import CURRENT_ID, LoadedDoc, Store
from memcli.store.format import Document, Entry, parse_document, parse_entry

__all__ = ["CURRENT_ID", "Document", "Entry", "LoadedDoc", "Store", "parse_document", "parse_entry"]
