"""Which parameter object a ``fully_shard`` unit's modules register between its forward and its
backward, as FSDP2 does (adversarial finding S42-1).

FSDP2 (torch 2.13, ``_fully_shard/_fsdp_param_group.py``) registers a unit's unsharded
parameters in its modules from the all-gather of its ``pre_forward`` until a ``reshard``:

* ``post_forward`` reshards only when the unit reshards after the forward
  (``post_forward_mesh_info`` set): ``reshard_after_forward=True``, or left ``None`` on a unit
  that is not the root; the root left ``None`` keeps them (``FSDPState._lazy_init``), as does
  ``reshard_after_forward=False`` (or the int 1) on any unit;
* ``post_backward`` (fired in the unit's backward, or by the root's final engine callback for
  every unit it did not reach) reshards unless ``set_reshard_after_backward(False)``, which
  leaves the unsharded parameters registered after the backward too;
* ``FSDPModule.reshard()`` registers the sharded ones, ``unshard()`` the unsharded ones.

The stand-in (:func:`dataparallel.install_units`) follows this with a :class:`Hold` per unit:
the forward's gathered views stay registered where FSDP2 keeps its unsharded parameters, and
a later forward within the hold reuses them (one object, as FSDP2's one unsharded parameter).
At the end of ``train_step`` every held view is replaced by the stored parameter
(:func:`release_all`): what FSDP2 registers after the step is not compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.fsdp_freed import alloc, free, restore_all
from spec_lang.torch_frontend.fsdp_grads import final_order, flush, flush_state
from spec_lang.torch_frontend.fsdp_mixed_precision import cast_inputs, cast_output, no_output_cast
from spec_lang.torch_frontend.fsdp_unsharded import left_over
from spec_lang.torch_frontend.recompute import param_versions

__all__ = ["Hold", "HOLDS", "Group", "GROUPS", "release_all", "reshards_after_forward",
           "param_less_unit", "forward_pre", "forward_post", "unshard_only", "queue_final",
           "new_step", "STEP_RESETS"]

HOLDS: dict[int, "Hold"] = {}
"""id(unit) -> its :class:`Hold`, for the units :func:`dataparallel.install_units` installed."""

_QUEUED = [False]       # the final engine callback is queued for the running backward

STEP_RESETS: list[Any] = []
"""Functions putting a stand-in's per-step hook state back (its "forward running" flag, the
views of its last forward), called by :func:`release_all`: a forward stopped inside (torch's
non-reentrant checkpoint ends a recomputation early by raising) runs no post-forward hook,
and what the hooks close over is step state (round 45b, r45b_14: UNKNOWN before)."""

GROUPS: dict[int, "Group"] = {}
"""id of a ``fully_shard([m1, m2, ...])`` call's member tuple -> its :class:`Group`."""


class Group:
    """``fully_shard([m1, m2, ...])``: ONE FSDP2 state over several modules (torch 2.13
    ``_fsdp_state._register_group_forward_hooks``). The pre-forward of the first member to run
    gathers and registers every member's unsharded parameters; a member's post-forward only
    counts it off; the post-forward of the last member to run (or, for members that did not
    run, that of the state that claimed the pass's ``iter_forward_root``: :func:`forward_post`,
    ``_force_complete_incomplete_states``) reshards the whole group. Round 43f,
    R43f-2: the stand-in gathered member by member, so a write to ``w2.weight`` between
    ``w1``'s and ``w2``'s forwards reached the stored shard, where for real it reaches the
    unsharded parameter (used once, lost at the reshard): a wrong step was EQUIVALENT.

    ``join(module, gather, done, cur)`` adds a member unit: ``gather()`` registers its views
    in ``cur``, ``done(out)`` is its post-forward (:func:`dataparallel.install_units`)."""

    def __init__(self) -> None:
        self.members: list[tuple[Any, Any, Any]] = []
        self.curs: list[dict] = []
        self.by_member: list[Hold | None] = []     # each member's hold, as ``members``
        self.holds: list[Hold] = []
        self.to_run: set[int] = set()
        self.in_forward = False     # FSDP2's TrainingState.FORWARD of the group's state

    @staticmethod
    def of(u: Any) -> "Group | None":
        """The group of unit ``u`` (made at its first member), or None for one module."""
        members = getattr(u, "settings", {}).get("_members", ())
        if len(members) < 2:
            return None
        return GROUPS.setdefault(id(members), Group())

    def join(self, module: Any, gather: Any, done: Any, cur: dict, hold: "Hold | None") -> None:
        self.members.append((module, gather, done))
        self.curs.append(cur)
        self.by_member.append(hold)
        if hold is not None:
            self.holds.append(hold)
            hold.mates = self.holds     # one state: one training state (round 45b, R45b-2)

    def reset(self) -> None:
        """The end of the step: no member open, no view left in a hook (step state)."""
        self.reset_forward()
        for cur in self.curs:
            cur.clear()

    def reset_forward(self) -> None:
        """The root's final backward callback: no member left to run."""
        self.to_run.clear()
        self.in_forward = False

    def ctx(self) -> "_Ctx | None":
        return _ctx(self.holds[0]) if self.holds else None

    def complete(self, out: Any) -> None:
        """The group's ``post_forward`` for members that did not run (or all ran)."""
        self.to_run.clear()
        self.in_forward = False
        for _, _, done in self.members:
            done(out)

    def pre(self, module: Any = None) -> None:
        """A member's pre-forward: the first of a pass gathers every member. A member whose
        views were gathered without autograd (a sibling's forward under ``no_grad``: the
        reentrant checkpoint's first forward) while this forward records it is gathered
        again: FSDP2's unsharded parameter is a leaf that requires grad in any grad mode
        (round 45b, R45b-3: the second member's gradient was lost)."""
        if not self.to_run:
            self.to_run = {id(m) for m, _, _ in self.members}
            for _, gather, _ in self.members:
                gather()
        elif torch.is_grad_enabled():
            for (m, gather, _), cur, h in zip(self.members, self.curs, self.by_member):
                if m is module and h is not None and any(
                        not v.requires_grad and h.new[n].requires_grad for n, v in cur.items()):
                    gather()

    def post(self, module: Any, out: Any) -> bool:
        """A member's post-forward; True when it completed the group."""
        if id(module) in self.to_run:
            self.to_run.discard(id(module))
            if not self.to_run:
                self.complete(out)
                return True
        return False


class _Ctx:
    """FSDP2's ``FSDPStateContext`` of one root and the states its lazy init visited: which
    state claimed ``iter_forward_root`` (torch 2.13 ``FSDPState._root_pre_forward``: the
    first state to start a forward pass while none holds it, a non-root one included)."""

    def __init__(self) -> None:
        self.forward_root: Any = None


def _ctx(h: "Hold") -> "_Ctx | None":
    """The context of ``h``'s state: its root's (the one whose lazy init visited it), its own
    when it is a root; None while undecided."""
    if h.root is None:
        return None
    r = h if h.root else (h.by or h)
    if r.ctx is None:
        r.ctx = _Ctx()
    return r.ctx


def forward_pre(h: "Hold") -> None:
    """FSDP2's ``_pre_forward`` of ``h``'s state (its group's, for a group member): at the
    state's first module in a pass, the lazy init (:func:`_decide_root`) and the claim of
    its context's ``iter_forward_root`` when none holds it.

    Raises:
        PlanError: what :func:`_decide_root` raises."""
    if h.root is None:
        _decide_root(h)
    st = Group.of(h.u) or h
    if not st.in_forward:
        st.in_forward = True
        c = _ctx(h)
        if c is not None and c.forward_root is None:
            c.forward_root = st


def forward_post(h: "Hold", out: Any) -> None:
    """FSDP2's ``_post_forward`` of ``h``'s state (a group's: at its completion): the state
    that claimed its context's ``iter_forward_root`` completes the context's groups whose
    members did not all run (``_force_complete_incomplete_states``) and gives the claim up.
    Round 44a: completing every open group at any root's post-forward resharded a group a
    standalone member call had claimed the forward for (R44a-2), or one of another root's
    context (an FSDP-based ``replicate`` root over a ``fully_shard`` root, R44a-1)."""
    st = Group.of(h.u) or h
    st.in_forward = False
    c = _ctx(h)
    if c is not None and c.forward_root is st:
        for g in list(GROUPS.values()):
            if g.to_run and g.ctx() is c:
                no_output_cast(g.holds)          # mp_policy (R47-1)
                g.complete(out)
        c.forward_root = None


def _decide_root(h: "Hold") -> None:
    """FSDP2's ``FSDPState._lazy_init``, at a unit's first forward: the unit is a root unless
    a root already decided holds it in its module tree; a new root makes every undecided unit
    under its module a non-root. So the root is the first unit whose forward runs, not the
    outermost module (round 43d, R43d-3: ``model.w1(x)`` called directly made ``w1`` a root
    that keeps its views after the forward).

    Raises:
        PlanError: what FSDP2's lazy init raises on every rank: a root over a unit already
            run (R43e-2), a root that is a ``fully_shard`` group of modules (R43f-1, R43d-6).
    """
    m = h.u.module
    mate = next((o for o in _mates(h) if o.root is not None), None)
    if mate is not None:        # one FSDP2 state over a list: decided for all (R43g-1)
        h.root, h.by = mate.root, mate.by
        return
    h.root = not any(o.root and _sees(o, h) and any(x is m for x in o.u.module.modules())
                     for o in HOLDS.values() if o is not h)
    if h.root and getattr(h.u, "settings", {}).get("_group", 1) > 1:
        raise PlanError(f"{_site(h.u)}: this fully_shard group of modules runs its forward "
                        "first and so is FSDP2's root: FSDP2 raises 'FSDP requires a single "
                        "root module' on every rank; fully_shard the model itself (R43f-1)")
    if h.root:
        inside = [o for o in HOLDS.values()
                  if o is not h and _sees(h, o) and any(x is o.u.module for x in m.modules())]
        for o in inside:
            if o.root is not None:          # R43e-2: FSDP2 raises here on every rank
                raise PlanError(f"{_site(h.u)}: this unit's first forward runs after the "
                                f"forward of a fully_shard unit inside it ({_site(o.u)}):"
                                " FSDP2 raises 'FSDP state has already been lazily "
                                "initialized' on every rank; run the outer module first")
        for o in inside:
            for x in [o, *_mates(o)]:       # a group's one state (R43g-1)
                x.root, x.by = False, h


def _mates(h: "Hold") -> list["Hold"]:
    """The other units of ``h``'s ``fully_shard([...])`` call: one FSDP2 state with ``h``."""
    members = getattr(h.u, "settings", {}).get("_members", ())
    if len(members) < 2:
        return []
    return [o for o in HOLDS.values() if o is not h
            and getattr(o.u, "settings", {}).get("_members") is members]


def _replicate(u: Any) -> bool:
    """Unit ``u`` is torch 2.13's FSDP-based ``replicate`` (``replicate_with_fsdp``)."""
    return u.kind != "fsdp"


def _sees(root: "Hold", o: "Hold") -> bool:
    """Whether a root ``root``'s lazy init visits state ``o`` in its module tree: FSDP2's
    ``_get_module_fsdp_state`` returns every FSDP2 state (a ``_ReplicateState`` derives from
    ``FSDPState``), the FSDP-based ``replicate``'s ``_get_state_for_module`` only replicate
    states (torch 2.13 ``_fsdp_state.FSDPState._lazy_init``, ``replicate_with_fsdp``)."""
    return not _replicate(root.u) or _replicate(o.u)


def param_less_unit(u: Any, new: Mapping[str, Any]) -> list[Any]:
    """A ``fully_shard`` unit that owns no parameter (every one in units inside it) is an
    FSDP2 state all the same, and may be the root: its :class:`Hold` (nothing to register)
    and a forward pre-hook deciding its root at its first forward (R43e-2: such a root run
    after a unit inside it raised for real and was accepted). Returns the hook handles."""
    h = HOLDS[id(u)] = Hold(u, [], new, None, None)

    def pre(module: Any, args: Any, kwargs: Any) -> Any:
        forward_pre(h)
        return cast_inputs(u, args, kwargs)     # mp_policy (R47-1)

    def post(module: Any, args: Any, out: Any) -> Any:
        forward_post(h, out)
        return cast_output(u, out)

    from spec_lang.torch_frontend.fsdp_backward import into_slots  # noqa: PLC0415
    hooks = [u.module.register_forward_pre_hook(pre, with_kwargs=True),
             u.module.register_forward_hook(post)]
    into_slots(u.module, hooks[0].id, hooks[1].id, u.settings.get("_hook_slots"))  # R47b-1
    return hooks


def reshards_after_forward(u: Any, root: bool) -> bool:
    """FSDP2's ``_reshard_after_forward`` for unit ``u``: ``reshard_after_forward`` as given to
    ``fully_shard`` or ``set_reshard_after_forward`` (recorded in ``u.settings``); left None,
    False for the root and True for any other unit; an int: 1 is False, the shard axis's size
    True (``_fsdp_init._get_post_forward_mesh_info``). The FSDP-based ``replicate`` never
    reshards after the forward (``replicate_with_fsdp.replicate`` passes
    ``post_forward_mesh_info=None``; round 43d, R43d-1).

    Raises:
        PlanError: another int (FSDP2 registers a parameter sharded over a smaller group after
            the forward, not modelled), a value FSDP2 rejects, or any value set on an
            FSDP-based ``replicate`` unit (torch raises there).
    """
    settings = getattr(u, "settings", {})
    v = settings.get("reshard_after_forward")
    if _replicate(u):   # FSDP-based replicate: post_forward_mesh_info None (R43d-1)
        if v is None:
            return False
        raise PlanError(f"{settings.get('_site', '<train file>')}: set_reshard_after_forward"
                        f"({v!r}) reaches a module wrapped by the FSDP-based replicate, where "
                        "torch 2.13 raises (its DDPMeshInfo has no shard_mesh_size); leave it "
                        "unset for replicate modules (recurse=False on their ancestors)")
    if v is None:
        return not root
    if isinstance(v, bool):
        return v
    ns = u.mesh.size(u.mesh.ndim - 1)
    if isinstance(v, int) and v in (1, ns):
        return v == ns
    site = settings.get("_site", "<train file>")
    raise PlanError(f"{site}: fully_shard(..., reshard_after_forward={v!r}) is not modelled "
                    f"(FSDP2 reshards to a group of {v} after the forward and registers that "
                    "parameter); use True or False (docs/torch.md, 'Known limits')")


class Hold:
    """The registration of one ``fully_shard`` unit's parameters outside its forward (module
    docstring). ``mine``: (name, [(module, attribute), ...]) of the unit's parameters;
    ``new``: name -> the stored parameter."""

    def __init__(self, u: Any, mine: list, new: Mapping[str, Any], root: bool,
                 make: Any) -> None:
        self.u, self.mine, self.new, self.root, self.make = u, mine, new, root, make
        self.views: dict[str, Any] = {}     # held: registered outside the unit's forward
        self.last: dict[str, Any] = {}      # the last forward's (or unshard's) views
        self.vers: dict[str, tuple] = {}    # the stored parameter's versions at its view
        self.by: Hold | None = None         # the root whose lazy init made this a non-root
        self.ctx: _Ctx | None = None        # a root's context (iter_forward_root)
        self.in_forward = False             # FSDP2's TrainingState.FORWARD of the state
        self.pre_bw = False     # the state's PRE_BACKWARD: its pre-backward hook fired
        self.post_bw = False    # its group's POST_BACKWARD: its post-backward ran
        self.grads: dict[int, list] = {}    # reduced, for its post-backward (fsdp_grads)
        self.leaves: list[Any] = []         # its unsharded leaves (fsdp_unsharded)
        self.freeing = False    # its post-backward reshards: flush_state frees its leaves
        self.mates: list[Hold] = [self]     # the holds of its state (a fully_shard group's)

    def stale(self, names: Any) -> list[str]:
        """The parameters among ``names`` whose stored (sharded) parameter was written since
        their held view was gathered (version counters: the optimizer's update)."""
        return [n for n in names if n in self.vers
                and param_versions(self.new[n]) != self.vers[n]]

    def view(self, n: str) -> Any:
        """The held view of ``n`` for a forward to reuse, or None (none held)."""
        if self.root is None:
            _decide_root(self)
        v = self.views.get(n)
        if v is not None and self.stale([n]):
            raise PlanError(f"{_site(self.u)}: FSDP2 keeps this unit's unsharded parameters "
                            f"from an earlier forward ({n}) and does not gather them again, "
                            "but the sharded parameter was updated since: the forward runs on "
                            "the values before the update (R43d-2); call reshard() on the "
                            "module after a forward that no backward follows")
        return v    # a held leaf, frozen or not, as FSDP2 does not gather again (R48d-1)

    def _register(self, views: Mapping[str, Any]) -> None:
        for rec in self.leaves:     # registered again: unsharded (fsdp_unsharded.collect)
            if any(v is rec.leaf for v in views.values()):
                rec.freed = False
                alloc(rec.leaf)     # its memory allocated again (fsdp_freed, R48a-2)
        for n, hs in self.mine:
            if n in views:
                for mod, attr in hs:
                    mod._parameters[attr] = views[n]  # noqa: SLF001

    def after_forward(self, cur: Mapping[str, Any]) -> None:
        """FSDP2's ``post_forward``: keep the forward's views ``cur`` registered when the unit
        does not reshard after the forward, or when the forward runs inside the backward
        (torch 2.13 ``FSDPParamGroup.post_forward`` reshards only ``if not is_bw()``: a
        checkpoint around the unit recomputes it there, and its unsharded parameters stay
        registered until its post-backward or the final callback; round 44c, R44c-8), else
        register the stored parameters."""
        self.last.update(cur)
        self.vers.update({n: param_versions(self.new[n]) for n in cur})
        in_bw = torch._C._current_graph_task_id() != -1  # noqa: SLF001 -- FSDP2's is_bw()
        if reshards_after_forward(self.u, self.root) and not in_bw:
            self.release()
        else:
            self.views.update(cur)
            self._register(cur)

    def hold(self) -> None:
        """``FSDPModule.unshard()``: register the unit's views (held ones, else made now by
        ``make(name)``) until a reshard."""
        cur = {}
        for n, _ in self.mine:
            v = self.view(n)
            if v is None:
                v = self.make(n)
                self.vers[n] = param_versions(self.new[n])
            cur[n] = v
        self.last.update(cur)
        self.views.update(cur)
        self._register(cur)

    def pre_backward(self) -> None:
        """FSDP2's ``_pre_backward`` of the unit (a hook on its forward's outputs,
        :func:`fsdp_backward.pre_backward_outputs`): the final callback queued, and the last
        forward's views registered again (FSDP2 unshards its one unsharded parameter object
        for the backward; round 44b, R44b-1).

        Raises:
            PlanError: a stored parameter updated since that view's gather (FSDP2 gathers the
                new values; the view holds the old ones)."""
        queue_final()
        for h in self.mates:    # the state's PRE_BACKWARD, its group's too (no longer
            h.pre_bw, h.post_bw = True, False   # POST_BACKWARD: the final callback reshards)
        if self.stale(self.last):
            raise PlanError(f"{_site(self.u)}: a parameter of this unit was updated between "
                            "its forward and its backward: FSDP2 all-gathers the new values "
                            "for the backward, which prove --torch does not model (R44b-1); "
                            "change parameters only in the optimizer step")
        if self.last:
            self.views.update(self.last)
            self._register(self.last)

    def in_backward(self) -> None:
        """FSDP2's ``post_backward`` of the unit (its inputs' gradient:
        :class:`fsdp_backward.RegisterPostBackward`): the stored parameters registered again,
        or (``reshard_after_backward`` False) the last forward's views."""
        queue_final()
        self.post_bw = True     # FSDP2 reduces every gradient it holds (fsdp_unsharded)
        if not _reshards_after_backward(self.u):
            self.views.update(self.last)
            self._register(self.last)
        else:
            self.release()      # the gradients are set after every member resharded:
            self.freeing = True  # flush, called by its caller for the group (R46c-2)

    def flush(self, factor: float) -> None:
        """The end of FSDP2's post-backward (:func:`flush_state`): the kept gradients divided
        by ``factor`` and set, parameter by parameter in the unit's order
        (``FSDPParamGroup.fsdp_params``), each followed by its hooks (round 46b, R46b-1: in
        arrival order a hook saw a later parameter's ``.grad`` set)."""
        if self.grads:
            flush(self.grads, [self.new[n] for n, _ in self.mine], factor)

    def release(self) -> None:
        """``reshard``: the stored parameters registered again, the unsharded leaves' memory
        freed (:func:`fsdp_freed.free`, R48a-2)."""
        self.views.clear()
        self._register(self.new)
        names = {id(self.new[n]): n for n, _ in self.mine}
        for rec in self.leaves:
            free(rec.leaf, "FSDP2's unsharded parameter of "
                 f"{names.get(id(rec.stored), 'a parameter')} ({_site(self.u)})")


def unshard_only(gather: Any, group: "Group | None", hold: "Hold | None", cur: dict) -> None:
    """A unit's pre-forward while its state is in ``PRE_BACKWARD`` (its pre-backward hook
    fired in this backward: a checkpoint recomputing it, a custom ``autograd.Function``'s
    backward running it): torch 2.13 ``FSDPState._pre_forward`` only unshards every group of
    the state and returns (no root pre-forward, no post-backward registration), and
    ``_post_forward`` returns at once, so nothing reshards it again in this backward; the
    final callback skips a group whose post-backward already ran (round 45a, R45a-2).
    ``gather``: the unit's own (one module), or the group's members' gathers; the views
    they register are held (:meth:`Hold.hold`'s record), so that views left past the step
    on parameters the optimizer then updates are refused by :func:`release_all` (round
    45a, r45a_03)."""
    pairs = [(gather, hold, cur)] if group is None else \
        list(zip([m[1] for m in group.members], group.by_member, group.curs))
    for g, h, c in pairs:
        g()
        if h is not None:
            h.last.update(c)
            h.views.update(c)
            h.vers.update({n: param_versions(h.new[n]) for n in c})


def new_step() -> None:
    """Before a step's hooks are installed: nothing left from a step a refusal or an error
    stopped inside its backward (the final callback it queued never ran; a test process
    runs many steps)."""
    HOLDS.clear()
    GROUPS.clear()
    STEP_RESETS.clear()
    LOST.clear()
    restore_all()
    _QUEUED[0] = False


def queue_final() -> None:
    """Queue the root's final backward callback (:func:`_final`) once per backward."""
    if not _QUEUED[0]:
        _QUEUED[0] = True
        torch.autograd.Variable._execution_engine.queue_callback(_final)  # noqa: SLF001


def _reshards_after_backward(u: Any) -> bool:
    return getattr(u, "settings", {}).get("reshard_after_backward", True) is not False


LOST: list[str] = []
"""Why a gradient was left out of the step (:func:`_final`), raised by
:func:`release_all`."""
_WHY = ("(a unit, or a member of a fully_shard group, recomputed by a reentrant checkpoint "
        "runs it in the checkpoint's inner backward)")
_FIX = ("put every use of the unit (every member of the group) under one checkpoint, use "
        "use_reentrant=False, or fully_shard the members separately")


def _final() -> None:
    """The root's final backward callback: every unit still holding views reshards unless it
    keeps them after the backward (``_root_post_backward_final_callback``); a group in
    ``POST_BACKWARD`` that a gradient reached after its last post-backward is recorded in
    :data:`LOST` (FSDP2 skips that group here: R45c-2)."""
    _QUEUED[0] = False
    for h in HOLDS.values():    # a gradient after its group's last post-backward (R45c-2)
        if h.post_bw and any(r.leaf.grad is not None for r in h.leaves):
            names = ', '.join(n for n, _ in h.mine[:3])
            LOST.append(f"{_site(h.u)}: a gradient of this fully_shard unit's parameters "
                        f"({names}) arrives after its group's last post-backward in this "
                        f"backward {_WHY}: FSDP2 has freed the unsharded parameters (torch fails "
                        "reading them) or does not reduce it, so the step leaves it out "
                        f"(R45c-2); {_FIX}")
    open_groups = [g for g in GROUPS.values() if g.to_run]
    members = {id(m) for g in open_groups for m, _, _ in g.members}
    for g in GROUPS.values():   # a group whose forward did not complete: unsharded until here
        g.reset_forward()
    order = final_order(list(HOLDS.values()))
    for i, h in enumerate(order):
        # its post-backward, unless it ran already (a unit unsharded again after it, by a
        # recomputation in PRE_BACKWARD, stays so: R45a-2)
        if (h.views or id(h.u.module) in members) and _reshards_after_backward(h.u) \
                and not h.post_bw:
            h.release()
        if i + 1 == len(order) or order[i + 1].mates is not h.mates:    # the state's last
            flush_state([x for x in h.mates if not x.post_bw])     # (R44c-2, R46c-2)
    for h in HOLDS.values():    # per-iteration state reset (iter_forward_root, IDLE)
        h.in_forward = h.pre_bw = h.post_bw = False
        if h.ctx is not None:
            h.ctx.forward_root = None


def release_all() -> None:
    """The end of ``train_step``: every held view replaced by the stored parameter (the state
    after the step is read from the stored parameters).

    Raises:
        PlanError: a unit still holds views whose stored parameters were written after their
            gather (round 43d, R43d-4 / R43d-5: a root's forward under ``no_grad`` before
            ``optimizer.step()``, or ``set_reshard_after_backward(False)`` left on): FSDP2's
            next forward reuses them without gathering, so the next step runs on the values
            before this step's update, which one traced step cannot show.
    """
    _QUEUED[0] = False
    lost = LOST[:1]
    LOST.clear()
    stale = [(h, h.stale(h.views)) for h in HOLDS.values()]
    left = [(h, w) for h in HOLDS.values() for w in [left_over(
        h.leaves, {id(h.new[n]): n for n, _ in h.mine})] if w is not None]
    for h in HOLDS.values():
        h.release()
        h.last.clear()
        h.vers.clear()
        h.root = None       # as before the step: the hooks' state is step state (R7-1)
        h.by, h.ctx, h.in_forward, h.pre_bw, h.post_bw = None, None, False, False, False
        h.grads.clear()
        h.leaves.clear()
    HOLDS.clear()
    for g in GROUPS.values():
        g.reset()
    GROUPS.clear()
    for reset in STEP_RESETS:
        reset()
    STEP_RESETS.clear()
    if lost:
        raise PlanError(lost[0])
    for h, what in left[:1]:
        raise PlanError(f"{_site(h.u)}: the step leaves {what}: FSDP2 keeps one unsharded "
                        "parameter object for the whole run, so the next step sees it, which one "
                        "traced step cannot show (R48a-1); remove the hook inside the step and "
                        "leave no .grad or attribute on a module's parameter")
    for h, names in stale:
        if names:
            raise PlanError(f"{_site(h.u)}: FSDP2 keeps this unit's unsharded parameters "
                            f"registered after the step ({', '.join(names[:3])}) and the "
                            "optimizer updated the sharded ones after they were gathered: the "
                            "next step's forward reuses the old values (R43d-4 / R43d-5); call "
                            "reshard() on the module after a forward no backward follows, or "
                            "set_reshard_after_backward(True) before the last backward")


def _site(u: Any) -> str:
    return getattr(u, "settings", {}).get("_site", "<train file>")
