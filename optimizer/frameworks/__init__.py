"""What each training framework can run, and the legality of a configuration on a model, cluster and
framework. Imports optimizer.spec."""
