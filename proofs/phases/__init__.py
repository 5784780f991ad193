"""The prover's phases (issue 14 item 4): each a function that takes what it needs and returns a
value; :func:`proofs.prover.prove` calls them in order.

=====================  =========================================================================
module                 phase (``Report.seconds`` key) and the value it returns
=====================  =========================================================================
``ledger``             what every phase shares: :class:`GoalResult` (one goal's status),
                       :class:`Work` (the obligations being proved), :class:`ProofLog` (the
                       certificate's node table and steps), :class:`Budget`, :class:`PhaseClock`
``shapes``             ``reduce``: :class:`Shapes` (reduced dims, real and reduced mesh, the
                       spec's denominators)
``dropout``            ``rng``: :class:`RngCheck` (dropout streams, ``proofs/rng.py``)
``cutting``            ``cut``: :class:`CutOutcome` (lemmas at layer boundaries,
                       ``proofs/cut.py``); ``rewrite`` (retry of failed premises whole); the
                       assembly of goal proofs from lemma proofs
``refutation``         ``refute``: :class:`Refuted` (the counterexample and notes)
``normalisation``      ``reuse`` and ``rewrite``: certified normal forms (``proofs/normal.py``)
``smt``                ``smt``: cas / z3 on the differing subterms, the egglog oracle
``verdict``            ``verdict``: :class:`Decision`
=====================  =========================================================================

The goal records (:class:`GoalResult`) are the one thing phases update in place: a phase marks
the goals it proved, refuted or gave up on, and the :class:`proofs.prover.Report` holds them.
"""
