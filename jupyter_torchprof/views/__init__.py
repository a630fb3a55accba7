"""Rendering of profiles: text, static HTML, progress, interactive widgets."""
