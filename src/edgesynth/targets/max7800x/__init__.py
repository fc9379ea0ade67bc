"""MAX78000 (AI85) and MAX78002 (AI87) CNN accelerators."""
