"""Capturing a profile: devices, the warm-up/steps/sync recipe, module ranges."""
