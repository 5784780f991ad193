"""proofs: the prover pipeline, certificates and their independent checker.

Modules (one concept each): ``prover`` (the pipeline, :func:`proofs.prover.prove`),
``reduction`` (the refuter's search sizes), ``refute``, ``confirm`` and ``counterexample``
(float64 refutation and its confirmation rule), ``obligations`` (reuse of identical goals),
``normal`` (certified normal forms from ``rewriting``), ``smt`` (the z3 scalar encoding),
``smt_fallback`` (the prover's z3 queries), ``admissible`` and ``size_literals`` (the
shape-reduction side conditions of ``docs/soundness.md``), ``cas`` (exact rational identities),
``certificate`` (steps and the writer), ``kernel``, ``checker``, ``checker_rules`` (the trusted
checker), ``cli`` (``prove`` and ``check-certificate``).

Nothing is imported here: ``check-certificate`` must load neither the prover nor ``rewriting``
nor egglog (``docs/certificate.md``).
"""
