"""Tasks: one schema for every benchmark, loaders, and the procedural suite."""

from execrl.tasks.schema import AssertTests, CallTests, Compare, StdioCase, StdioTests, Task, Tests

__all__ = ["AssertTests", "CallTests", "Compare", "StdioCase", "StdioTests", "Task", "Tests"]
