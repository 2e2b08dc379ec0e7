"""Security decisions with no I/O: ACL bindings and filters (acls.py) and the authorizer (authorizer.py)."""
