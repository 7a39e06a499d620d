"""The visible suite: the two tests shown on the exercise page, run for everyone."""


def _with_decoders(ns, budget, n=64):
    s = ns["Scheduler"](budget, 1024, 10**7)
    for i in range(n):
        s.add(ns["Req"](i, 1, 10_000))
    s.complete(s.schedule())  # one-token prompts: all are decoding now
    return s


def test_decodes_run_before_the_prompt(ns):
    """64 running decodes get one token each before a new 8,192-token prompt gets the rest of a 512 budget."""
    s = _with_decoders(ns, 512)
    s.add(ns["Req"](999, 8192, 10))
    plan = s.schedule()
    kinds = [n for _, n in plan]
    assert kinds[:64] == [1] * 64, (f"the 64 decodes must be scheduled first, one token each; the plan begins with "
                                    f"{kinds[:64].count(1)} one-token entries ({len(plan)} entries in all)")
    prompt = [n for r, n in plan if r.rid == 999]
    # Say what the plan held of the prompt: nothing at all, or a chunk of the wrong size.
    assert prompt, "the new prompt (rid 999) must get the 512 - 64 = 448 tokens left, but the plan holds none of it"
    assert plan[-1][0].rid == 999 and plan[-1][1] == 448, (
        f"512 - 64 = 448 prompt tokens fit; the plan gives the prompt {prompt[0]} "
        f"{'as its last entry' if plan[-1][0].rid == 999 else 'before other entries'}")


def test_a_long_prompt_takes_19_chunks_ending_with_128(ns):
    """An 8,192-token prompt behind 64 decodes is prefilled in 19 chunks, the last of 128 tokens."""
    s = _with_decoders(ns, 512)
    big = ns["Req"](999, 8192, 10)
    s.add(big)
    chunks = []
    for _ in range(100):
        if big.prefilled >= big.prompt_len:
            break
        plan = s.schedule()
        chunks += [n for r, n in plan if r.rid == 999]
        s.complete(plan)
    assert big.prefilled == big.prompt_len, (f"after {len(chunks)} chunks the prompt has {big.prefilled} of 8,192 "
                                             f"tokens prefilled: it must reach 8,192 exactly, within 100 steps")
    assert len(chunks) == 19 and chunks[-1] == 128, f"expected 19 chunks ending in 128, got {len(chunks)} ending in {chunks[-1]}"
