"""envs: see ../shared/DESIGN.md; filled in by its issue."""
