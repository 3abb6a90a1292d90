"""What leaves the planner: launch commands per framework and engine, plan diffs, pipeline timelines."""
