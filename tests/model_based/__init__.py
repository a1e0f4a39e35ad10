"""The model-based test of the whole store (DESIGN invariant 12).

One stateful property test drives random sequences of operations against a
plain-Python reference model under every pairwise combination of settings,
on two tenants of one store (a model each), and checks after every step that
the store and the model agree, and that the tenant that did not act shows
what it showed before:

    configurations.py   the covering array of settings, the invalid pairs and why
    model.py            the reference model: dicts and lists
    values.py           the values drawn for each of ``model.VALUE_FIELDS``
    world.py            the store under test: opening, reopening, its files, a child writer
    operations.py       THE TABLE: each operation's precondition, action and model update
    ops_tenants.py      across tenants: a run id only the other holds, verify, backup, erase
    invariants.py       what must hold after every step (and at the end of each example)
    machine.py          the hypothesis state machine built from the table, one class per row:
                        each operation a rule per tenant (``b_<name>``: the second tenant's)
    repro.py            replaying a list of steps (a shrunk failure, a regression script)
    soak.py             ``make soak``: fresh seeds for as long as asked

docs/testing.md says how to run, read and replay it.
"""
