(** * Rules: the rule table, one checker and one soundness lemma per rule.

    [rtag] names every rule of docs/rules.md that has a Coq checker; the exporter maps a
    certificate's rule name to its tag (proofs/coq_export.py). A rule without a tag is
    exported as an opaque step and reported as not Coq-checked. *)

From Coq Require Import Reals List NArith.
From Shardproof Require Import Base Num Pow Term Props RuleLib RulesBasic RulesLift RulesAxis
  RulesEinsum RulesPow RulesContent RulesScalarOut RulesLiftEinsum RulesCanon RulesLiftReindex
  RulesEinsumMul RulesSplit RulesFactorOut RulesCollect RulesReorder RulesMerge RulesShift
  RulesActivation RulesOneHot RulesReduceMax RulesRadical RulesNested RulesGather RulesPerm
  RulesPermLift RulesTopk RulesPush RulesMove RulesUnit RulesOnline RulesUnitDim
  RulesComponents.
Import ListNotations.

Inductive rtag :=
| TStopGrad | TCast | TNegMul | TRecipPow | TSqrtPow | TRsqrtPow | TPowOne | TDimSize
| TAxisSize | TRankConstUniform | TDimsSort | TLiftShardEw | TUnitAxis | TAllReduceMaxInv
| TAllReduceSumInv | TAllReducePart | TEinsumCanon | TPowMul | TEinsumIdentity
| TEinsumPointwise | TAddContent | TEinsumScalarOut | TLiftShardEinsum | TMulCanon
| TAddCanon | TReindexScalarOut | TLiftShardChunk | TLiftShardRename | TEinsumMulCanon
| TAllReduceSplit | TEinsumFactorOut | TLiftShardConcat | TPowConst | TShardSwap
| TAllReduceAdd | TAllReduceReindex | TReduceScatterDef | TBroadcastInv | TAllGatherShard
| TAllReduceShardComm | TAllToAllDef | TPermIdentity | TAllReduceMulFactor
| TAllReduceSwap | TPermCompose | TLiftShardReduceMax | TEinsumUnitAxis | TConcatContent
| TLiftPermEw | TAddScaledSum | TPowPow | TExpMaxShift | TSiluDef | TLiftShardOneHot
| TOneHotShardOut | TReduceMaxUnitAxis | TPowConstFactor | TEinsumNested | TAddMaxFactorOut
| TAllReduceMaxShard | TAllGatherShardComm | TLiftPermEinsum | TEinsumPermContract
| TLiftPermReduceMax | TLiftPermChunk | TLiftShardPermute | TLiftPermRename | TLiftPermOneHot
| TLiftPermConcat | TReduceMaxPerm | TLiftShardTopk | TAllReduceEinsumPush
| TPermSwap | TAllReducePermute | TAllReduceConcat | TAllGatherUnitAxis | TAllReduceRankConst
| TLiftPermTopk | TAllReduceAllGatherComm | TLiftShardShift | TLiftShardTopkElig | TLiftPermTopkElig
| TEinsumMaxFactorOut | TEinsumRecipFactorOut | TExpMaxShiftBlock | TGeluDef | TEinsumUnitDim | TSqueezeEw | TReduceMaxUnitDim
| TEinsumComponents.

Definition rule_chk (t : rtag) : gctx -> positive -> positive -> hint -> option (list claim) :=
  match t with
  | TStopGrad => chk_stop_grad
  | TCast => chk_cast
  | TNegMul => chk_neg_mul
  | TRecipPow => chk_recip_pow
  | TSqrtPow => chk_sqrt_pow
  | TRsqrtPow => chk_rsqrt_pow
  | TPowOne => chk_pow_one
  | TDimSize => chk_dim_size
  | TAxisSize => chk_axis_size
  | TRankConstUniform => chk_rank_const_uniform
  | TDimsSort => chk_dims_sort
  | TLiftShardEw => chk_lift_ew
  | TUnitAxis => chk_unit_axis
  | TAllReduceMaxInv => chk_allreduce_max_inv
  | TAllReduceSumInv => chk_allreduce_sum_inv
  | TAllReducePart => chk_allreduce_part
  | TEinsumCanon => chk_einsum_canon
  | TPowMul => chk_pow_mul
  | TEinsumIdentity => chk_einsum_identity
  | TEinsumPointwise => chk_einsum_pointwise
  | TAddContent => chk_add_content
  | TEinsumScalarOut => chk_einsum_scalar_out
  | TLiftShardEinsum => chk_lift_einsum
  | TMulCanon => chk_mul_canon_all
  | TAddCanon => chk_add_canon_g
  | TReindexScalarOut => chk_reindex_scalar_out
  | TLiftShardChunk => chk_lift_chunk
  | TLiftShardRename => chk_lift_rename
  | TEinsumMulCanon => chk_einsum_mul_canon_all
  | TAllReduceSplit => chk_allreduce_einsum_split
  | TEinsumFactorOut => chk_einsum_factor_out
  | TLiftShardConcat => chk_lift_concat
  | TPowConst => chk_pow_const_all
  | TShardSwap => chk_shard_swap
  | TAllReduceAdd => chk_allreduce_add
  | TAllReduceReindex => chk_allreduce_reindex
  | TReduceScatterDef => chk_reduce_scatter_def
  | TBroadcastInv => chk_broadcast_invariant
  | TAllGatherShard => chk_allgather_shard
  | TAllReduceShardComm => chk_allreduce_shard_comm
  | TAllToAllDef => chk_all_to_all_def
  | TPermIdentity => chk_perm_identity
  | TAllReduceMulFactor => chk_allreduce_mul_factor
  | TAllReduceSwap => chk_allreduce_swap
  | TPermCompose => chk_perm_compose
  | TLiftShardReduceMax => chk_lift_reduce_max
  | TEinsumUnitAxis => chk_einsum_unit_axis
  | TConcatContent => chk_concat_content
  | TLiftPermEw => chk_lift_perm_ew
  | TAddScaledSum => chk_add_scaled_sum
  | TPowPow => chk_pow_pow
  | TExpMaxShift => chk_exp_max_shift
  | TSiluDef => chk_silu_def
  | TLiftShardOneHot => chk_lift_onehot
  | TOneHotShardOut => chk_onehot_shard_out
  | TReduceMaxUnitAxis => chk_reduce_max_unit_axis
  | TPowConstFactor => chk_pow_const_factor
  | TEinsumNested => chk_einsum_nested
  | TAddMaxFactorOut => chk_add_max_factor_out
  | TAllReduceMaxShard => chk_allreduce_max_shard
  | TAllGatherShardComm => chk_allgather_shard_comm
  | TLiftPermEinsum => chk_lift_perm_einsum
  | TEinsumPermContract => chk_einsum_perm_contract
  | TLiftPermReduceMax => chk_lift_perm_reduce_max
  | TLiftPermChunk => chk_lift_perm_chunk
  | TLiftShardPermute => chk_lift_shard_permute
  | TLiftPermRename => chk_lift_perm_rename
  | TLiftPermOneHot => chk_lift_perm_onehot
  | TLiftPermConcat => chk_lift_perm_concat
  | TReduceMaxPerm => chk_reduce_max_perm
  | TLiftShardTopk => chk_lift_shard_topk
  | TAllReduceEinsumPush => chk_allreduce_einsum_push
  | TPermSwap => chk_perm_swap
  | TAllReducePermute => chk_allreduce_permute
  | TAllReduceConcat => chk_allreduce_concat
  | TAllGatherUnitAxis => chk_allgather_unit_axis
  | TAllReduceRankConst => chk_allreduce_rank_const
  | TLiftPermTopk => chk_lift_perm_topk
  | TAllReduceAllGatherComm => chk_allreduce_allgather_comm
  | TLiftShardShift => chk_lift_shard_shift
  | TLiftShardTopkElig => chk_lift_shard_topk_elig
  | TLiftPermTopkElig => chk_lift_perm_topk_elig
  | TEinsumMaxFactorOut => chk_einsum_max_factor_out
  | TEinsumRecipFactorOut => chk_einsum_recip_factor_out
  | TExpMaxShiftBlock => chk_exp_max_shift_block
  | TGeluDef => chk_gelu_def
  | TEinsumUnitDim => chk_einsum_unit_dim
  | TSqueezeEw => chk_squeeze_ew
  | TReduceMaxUnitDim => chk_reduce_max_unit_dim
  | TEinsumComponents => chk_einsum_components
  end.

(** The exporter's rule codes: one line per rule, [| code => Some tag (* rule name *)]
    (proofs/coq_export.py reads this table; tests check that every rule of the registry has a
    line). *)
Definition rtag_of (n : N) : option rtag :=
  match n with
  | 0%N => Some TStopGrad (* stop-grad-elim *)
  | 1%N => Some TCast (* cast-elim *)
  | 2%N => Some TNegMul (* neg-mul *)
  | 3%N => Some TRecipPow (* recip-pow *)
  | 4%N => Some TSqrtPow (* sqrt-pow *)
  | 5%N => Some TRsqrtPow (* rsqrt-pow *)
  | 6%N => Some TPowOne (* pow-one *)
  | 7%N => Some TDimSize (* dim-size *)
  | 8%N => Some TAxisSize (* axis-size *)
  | 9%N => Some TRankConstUniform (* rank-const-uniform *)
  | 10%N => Some TDimsSort (* dims-sort *)
  | 11%N => Some TLiftShardEw (* lift-shard-elementwise *)
  | 12%N => Some TUnitAxis (* allreduce-unit-axis *)
  | 13%N => Some TUnitAxis (* part-unit-axis *)
  | 14%N => Some TUnitAxis (* broadcast-unit-axis *)
  | 15%N => Some TAllReduceMaxInv (* allreduce-max-invariant *)
  | 16%N => Some TAllReduceSumInv (* allreduce-sum-invariant *)
  | 17%N => Some TAllReducePart (* allreduce-part *)
  | 18%N => Some TEinsumCanon (* einsum-canon *)
  | 19%N => Some TPowMul (* pow-mul *)
  | 20%N => Some TEinsumIdentity (* einsum-identity *)
  | 21%N => Some TEinsumPointwise (* einsum-pointwise *)
  | 22%N => Some TAddContent (* add-content *)
  | 23%N => Some TEinsumScalarOut (* einsum-scalar-out *)
  | 24%N => Some TLiftShardEinsum (* lift-shard-einsum *)
  | 25%N => Some TMulCanon (* mul-canon *)
  | 26%N => Some TAddCanon (* add-canon *)
  | 27%N => Some TReindexScalarOut (* rename-scalar-out *)
  | 28%N => Some TReindexScalarOut (* chunk-scalar-out *)
  | 29%N => Some TLiftShardChunk (* lift-shard-chunk *)
  | 30%N => Some TLiftShardRename (* lift-shard-rename *)
  | 31%N => Some TEinsumMulCanon (* einsum-mul-canon *)
  | 32%N => Some TAllReduceSplit (* allreduce-einsum-split *)
  | 33%N => Some TEinsumFactorOut (* einsum-factor-out *)
  | 34%N => Some TLiftShardConcat (* lift-shard-concat *)
  | 35%N => Some TPowConst (* pow-const *)
  | 36%N => Some TShardSwap (* shard-swap *)
  | 37%N => Some TAllReduceAdd (* allreduce-add *)
  | 38%N => Some TAllReduceReindex (* allreduce-rename *)
  | 39%N => Some TAllReduceReindex (* allreduce-chunk *)
  | 40%N => Some TReduceScatterDef (* reduce-scatter-def *)
  | 41%N => Some TBroadcastInv (* broadcast-invariant *)
  | 42%N => Some TAllGatherShard (* allgather-shard *)
  | 43%N => Some TAllReduceShardComm (* allreduce-shard-comm *)
  | 44%N => Some TAllToAllDef (* all-to-all-def *)
  | 45%N => Some TPermIdentity (* perm-identity *)
  | 46%N => Some TAllReduceMulFactor (* allreduce-mul-factor *)
  | 47%N => Some TAllReduceSwap (* allreduce-swap *)
  | 48%N => Some TPermCompose (* perm-compose *)
  | 49%N => Some TLiftShardReduceMax (* lift-shard-reduce-max *)
  | 50%N => Some TEinsumUnitAxis (* einsum-unit-axis *)
  | 51%N => Some TConcatContent (* concat-content *)
  | 52%N => Some TLiftPermEw (* lift-perm-elementwise *)
  | 53%N => Some TAddScaledSum (* add-scaled-sum *)
  | 54%N => Some TPowPow (* pow-pow *)
  | 55%N => Some TExpMaxShift (* exp-max-shift *)
  | 56%N => Some TSiluDef (* silu-def *)
  | 57%N => Some TLiftShardOneHot (* lift-shard-onehot *)
  | 58%N => Some TOneHotShardOut (* onehot-shard-out *)
  | 59%N => Some TReduceMaxUnitAxis (* reduce-max-unit-axis *)
  | 60%N => Some TPowConstFactor (* pow-const-factor *)
  | 61%N => Some TEinsumNested (* einsum-nested *)
  | 62%N => Some TAddMaxFactorOut (* add-max-factor-out *)
  | 63%N => Some TAllReduceMaxShard (* allreduce-max-shard *)
  | 64%N => Some TAllGatherShardComm (* allgather-shard-comm *)
  | 65%N => Some TLiftPermEinsum (* lift-perm-einsum *)
  | 66%N => Some TEinsumPermContract (* einsum-perm-contract *)
  | 67%N => Some TLiftPermReduceMax (* lift-perm-reduce-max *)
  | 68%N => Some TLiftPermChunk (* lift-perm-chunk *)
  | 69%N => Some TLiftShardPermute (* lift-shard-permute *)
  | 70%N => Some TLiftPermRename (* lift-perm-rename *)
  | 71%N => Some TLiftPermOneHot (* lift-perm-onehot *)
  | 72%N => Some TLiftPermConcat (* lift-perm-concat *)
  | 73%N => Some TReduceMaxPerm (* reduce-max-perm *)
  | 74%N => Some TLiftShardTopk (* lift-shard-topk *)
  | 75%N => Some TAllReduceEinsumPush (* allreduce-einsum-push *)
  | 76%N => Some TPermSwap (* perm-swap *)
  | 77%N => Some TAllReducePermute (* allreduce-permute *)
  | 78%N => Some TAllReduceConcat (* allreduce-concat *)
  | 79%N => Some TAllGatherUnitAxis (* allgather-unit-axis *)
  | 80%N => Some TAllReduceRankConst (* allreduce-rank-const *)
  | 81%N => Some TLiftPermTopk (* lift-perm-topk *)
  | 82%N => Some TAllReduceAllGatherComm (* allreduce-allgather-comm *)
  | 83%N => Some TLiftShardShift (* lift-shard-shift *)
  | 84%N => Some TLiftShardTopkElig (* lift-shard-topk-elig *)
  | 85%N => Some TLiftPermTopkElig (* lift-perm-topk-elig *)
  | 86%N => Some TEinsumMaxFactorOut (* einsum-max-factor-out *)
  | 87%N => Some TEinsumRecipFactorOut (* einsum-recip-factor-out *)
  | 88%N => Some TExpMaxShiftBlock (* exp-max-shift-block *)
  | 89%N => Some TGeluDef (* gelu-def *)
  | 90%N => Some TEinsumUnitDim (* einsum-unit-dim *)
  | 91%N => Some TSqueezeEw (* squeeze-elementwise *)
  | 92%N => Some TReduceMaxUnitDim (* reduce-max-unit-dim *)
  | 93%N => Some TEinsumComponents (* einsum-components *)
  | _ => None
  end.

Lemma rule_chk_sound : forall t, rule_sound (rule_chk t).
Proof.
  destruct t; simpl.
  - apply chk_unary_id_sound; auto.
  - apply chk_unary_id_sound; auto.
  - apply chk_neg_mul_sound.
  - apply chk_recip_pow_sound.
  - apply chk_sqrt_pow_sound.
  - apply chk_rsqrt_pow_sound.
  - apply chk_pow_one_sound.
  - apply chk_size_sound.
  - apply chk_size_sound.
  - apply chk_rank_const_uniform_sound.
  - apply chk_dims_sort_sound.
  - apply chk_lift_ew_sound.
  - apply chk_unit_axis_sound.
  - apply chk_allreduce_max_inv_sound.
  - apply chk_allreduce_sum_inv_sound.
  - apply chk_allreduce_part_sound.
  - apply chk_einsum_canon_sound.
  - apply chk_pow_mul_sound.
  - apply chk_einsum_identity_sound.
  - apply chk_einsum_pointwise_sound.
  - apply chk_add_content_sound.
  - apply chk_einsum_scalar_out_sound.
  - apply chk_lift_einsum_sound.
  - apply chk_mul_canon_all_sound.
  - apply chk_add_canon_g_sound.
  - apply chk_reindex_scalar_out_sound.
  - apply chk_lift_chunk_sound.
  - apply chk_lift_rename_sound.
  - apply chk_einsum_mul_canon_all_sound.
  - apply chk_allreduce_einsum_split_sound.
  - apply chk_einsum_factor_out_sound.
  - apply chk_lift_concat_sound.
  - apply chk_pow_const_all_sound.
  - apply chk_shard_swap_sound.
  - apply chk_allreduce_add_sound.
  - apply chk_allreduce_reindex_sound.
  - apply chk_reduce_scatter_def_sound.
  - apply chk_broadcast_invariant_sound.
  - apply chk_allgather_shard_sound.
  - apply chk_allreduce_shard_comm_sound.
  - apply chk_all_to_all_def_sound.
  - apply chk_perm_identity_sound.
  - apply chk_allreduce_mul_factor_sound.
  - apply chk_allreduce_swap_sound.
  - apply chk_perm_compose_sound.
  - apply chk_lift_reduce_max_sound.
  - apply chk_einsum_unit_axis_sound.
  - apply chk_concat_content_sound.
  - apply chk_lift_perm_ew_sound.
  - apply chk_add_scaled_sum_sound.
  - apply chk_pow_pow_sound.
  - apply chk_exp_max_shift_sound.
  - apply chk_silu_def_sound.
  - apply chk_lift_onehot_sound.
  - apply chk_onehot_shard_out_sound.
  - apply chk_reduce_max_unit_axis_sound.
  - apply chk_pow_const_factor_sound.
  - apply chk_einsum_nested_sound.
  - apply chk_add_max_factor_out_sound.
  - apply chk_allreduce_max_shard_sound.
  - apply chk_allgather_shard_comm_sound.
  - apply chk_lift_perm_einsum_sound.
  - apply chk_einsum_perm_contract_sound.
  - apply chk_lift_perm_reduce_max_sound.
  - apply chk_lift_perm_chunk_sound.
  - apply chk_lift_shard_permute_sound.
  - apply chk_lift_perm_rename_sound.
  - apply chk_lift_perm_onehot_sound.
  - apply chk_lift_perm_concat_sound.
  - apply chk_reduce_max_perm_sound.
  - apply chk_lift_shard_topk_sound.
  - apply chk_allreduce_einsum_push_sound.
  - apply chk_perm_swap_sound.
  - apply chk_allreduce_permute_sound.
  - apply chk_allreduce_concat_sound.
  - apply chk_allgather_unit_axis_sound.
  - apply chk_allreduce_rank_const_sound.
  - apply chk_lift_perm_topk_sound.
  - apply chk_allreduce_allgather_comm_sound.
  - apply chk_lift_shard_shift_sound.
  - apply chk_lift_shard_topk_elig_sound.
  - apply chk_lift_perm_topk_elig_sound.
  - apply chk_einsum_max_factor_out_sound.
  - apply chk_einsum_recip_factor_out_sound.
  - apply chk_exp_max_shift_block_sound.
  - apply chk_gelu_def_sound.
  - apply chk_einsum_unit_dim_sound.
  - apply chk_squeeze_ew_sound.
  - apply chk_reduce_max_unit_dim_sound.
  - apply chk_einsum_components_sound.
Qed.
