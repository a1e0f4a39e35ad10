"""Every store operation, written once, as a generator of named queries, grouped by subject.

An operation yields ``Query`` objects (``store/query.py``) and receives each
one's rows back, as the named rows of the query's spec; it never touches a
connection. A driver opens the transaction, runs the queries the operation
asks for and commits when the generator returns — or rolls back when it
raises. This is how sync and async stores share one implementation of each
operation.

``saving`` appends a checkpoint; ``loading`` reads one back (and the
database blob target's values); ``runs`` forks and deletes whole runs;
``leases`` is the work queue; ``listing`` reads runs' summaries and history.
"""
