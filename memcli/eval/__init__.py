"""Evaluation: answer metrics and the LoCoMo benchmark."""
