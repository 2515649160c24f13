"""Jumpgate: in-network processing as a service for data analytics."""
__version__ = "0.1.0"
