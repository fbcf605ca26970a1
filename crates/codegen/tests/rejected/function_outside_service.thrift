void ping()
