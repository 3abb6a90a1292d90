"""Services: the operations the API and the workers share. They call repositories and the optimizer; the caller
owns the transaction (a request or a task) unless a function says it commits itself."""
