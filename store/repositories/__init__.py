"""Every query of the service lives in a repository; services and tasks never write SQL."""
