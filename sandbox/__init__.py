"""Child-side runtime of execengine (standard library only, Python >= 3.8)."""
