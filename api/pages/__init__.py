"""Server-rendered web pages."""
