"""``proofs.counterexample.sizes_text``: a counterexample's sizes line lists a dim that only
copies another's size (the torch front end's twins: ``ffn_2``, ``seq_k``) by name only, unless
the values' index uses it (stop 54's new user: 21 sizes for a 7-entry ``SIZES``)."""

from proofs.counterexample import sizes_text


def test_copies_of_a_size_are_named_once_and_index_dims_kept():
    b = {"batch": 2, "ffn": 48, "ffn_2": 48, "head_dim": 8, "head_dim_half": 4,
         "head_dim_half_2": 4, "n_kv_heads_n_rep_head_dim": 32, "n_kv_heads": 2, "seq": 16,
         "seq_k": 16, "seq_k_tmp": 16, "seq_len": 12, "tp": 2}
    assert sizes_text(b, {"seq_k"}) == (
        "batch=2, ffn=48, head_dim=8, head_dim_half=4, n_kv_heads=2, "
        "n_kv_heads_n_rep_head_dim=32, seq=16, seq_k=16, seq_len=12, tp=2; at the same sizes: "
        "ffn_2, head_dim_half_2, seq_k_tmp")
    assert sizes_text({"dp": 2, "h": 6}, set()) == "dp=2, h=6"
