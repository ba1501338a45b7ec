"""Selection, validation and the FlowPlan: everything decided before a body runs."""
