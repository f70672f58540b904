"""Retrieval: evidence for a question from the topic library and CURRENT."""
