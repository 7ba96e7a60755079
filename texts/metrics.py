"""The metrics table's and the formula's sentences, English and Chinese: metric names, the
article's formula with measured terms, what an import found, and what a gap between predicted
and measured speedup was made of (merged by ``texts.strings``).
"""

from __future__ import annotations

EN: dict[str, str] = {
    "metric": "metric",
    "ratio": "{b} / {a}",
    "ratio_note": "A ratio column divides each row's value in one run by another's, as its "
                  "header says: for a time (a step, idle time, TTFT, ITL) below 1× means faster; "
                  "for a rate or a share (tokens/s, GPU busy) above 1× means better.",
    "m_tokens_per_s": "output tokens / s",
    "m_decode_tokens_per_s": "decode tokens / s",
    "m_output_tokens": "output tokens",
    "m_wall_s": "wall time (s)",
    "m_steps": "steps",
    "m_gpu_busy_frac": "GPU busy, all stream lanes",
    "m_engine_busy_frac": "GPU busy, engine stream alone",
    "m_active_busy_frac": "GPU busy while requests were in the system (all stream lanes)",
    "m_idle_us_total": "GPU idle total (ms)",
    "m_idle_gap_count": "idle gaps",
    "m_mean_step_us": "mean step time (ms)",
    "m_mean_idle_per_step_us": "mean GPU idle per step (ms)",
    "m_t_fwd_us": "T_fwd: forward per step (ms)",
    "m_t_cpu_us": "T_sched + T_post: CPU per step (ms)",
    "m_ttft_ms_mean": "time to first token, mean (ms)",
    "m_itl_ms_mean": "inter-token latency (ITL), mean (ms)",
    "m_itl_ms_p99": "inter-token latency (ITL), p99 (ms)",
    "m_tpot_ms_mean": "time per output token, mean (ms)",
    "formula_serial": "serial step ≈ T_fwd + T_sched + T_post = {fwd:.2f} + {cpu:.2f} = "
                      "{total:.2f} ms",
    "formula_overlap": "overlapped step ≈ max(T_fwd, T_sched + T_post) = max({fwd:.2f}, "
                       "{cpu:.2f}) = {best:.2f} ms",
    "formula_predicted": "predicted speedup: {pred:.2f}×",
    "formula_measured": "measured speedup per decode step ({a} step time ÷ {b} step time, "
                        "same steady window): {meas:.2f}×",
    "formula_whole": "whole run, output tokens/s ({b} ÷ {a}; prefill, fill and drain included): "
                     "{meas:.2f}×",
    "formula_terms": "terms per decode step, measured in the {label} run over its steady window "
                     "(the middle 80% of its decode steps)",
    "why_below": "The {label} run measured {meas:.2f}×, {pct:.0f}% less than the {pred:.2f}× "
                 "the formula predicts.",
    "why_above": "The {label} run measured {meas:.2f}×, {pct:.0f}% more than the {pred:.2f}× "
                 "the formula predicts.",
    "why_none": "None of the terms this page measures explains the difference (on a shared "
                "machine, run-to-run noise alone moves a speedup by about ±15%).",
    "why_serial_overlapped": "in the {label} run {ms:.2f} ms of the CPU's work per step ran while "
                             "its forward ran (launching a forward is CPU work that goes on while "
                             "the forward runs), so its step took {step:.2f} ms, not T_fwd + "
                             "T_sched + T_post = {total:.2f} ms: the serial loop was already partly "
                             "overlapped",
    "why_serial_waited": "the {label} run's step took {step:.2f} ms, {ms:.2f} ms more than T_fwd + "
                         "T_sched + T_post: waiting that is neither forward nor CPU work (the "
                         "result copy, the device's answer), which overlap hides as well",
    "why_overlap_rest": "the {label} run's step took {step:.2f} ms, {ms:.2f} ms more than the "
                        "longer of its own forward and CPU work ({longer:.2f} ms)",
    "why_gap_p50": ", with its forwards a median {gap:.3f} ms apart",
    "why_forward": "the forward took {ms_b:.2f} ms a step in the {b} run against {ms_a:.2f} ms in "
                   "the {a} run",
    "why_cpu": "the CPU's work took {ms_b:.2f} ms a step in the {b} run against the {ms_a:.2f} ms "
               "the formula takes from the {a} run",
    "profiled_note": "<b>Kernel lanes</b>: this recording ran torch.profiler over steps "
                     "{first}–{last} (the step window shows them). Starting the profiler and its "
                     "per-kernel bookkeeping slow the run, so its totals are not the loops' own: "
                     "read the kernel lanes, not the speedup. In eager mode a small model is "
                     "launch-bound: the forward's span looks solid while its kernels are sparse.",
    "note_steps_profiler_step": "{steps} steps, from the trace's ProfilerStep marks.",
    "note_steps_graph_launch": "{steps} steps, one per CUDA graph launch (the trace has no "
                               "ProfilerStep marks).",
    "note_steps_marker": "{steps} steps, one per launch of <code>{marker}</code>, the kernel that "
                         "runs once per forward (the trace has no ProfilerStep marks).",
    "note_steps_none": "No repeating step was found: the whole trace is one window.",
    "note_no_cpu_lanes": "No host thread in the trace launched the GPU work (was it recorded "
                         "with ProfilerActivity.CPU?): only the GPU lanes are drawn.",
    "note_no_tokens": "A trace holds no tokens: token counts, rates and latencies are not in "
                      "it, so the table leaves them out (–).",
    "why_measured": "What the runs measured that the formula leaves out:",
    "why_join": "; ",
    "why_raises": " (this raises the measured speedup)",
    "why_lowers": " (this lowers the measured speedup)",
    "why_end": ".",
    "why_other_load": "other programs used {share:.0f}% of this machine's {cpus} cores meanwhile",
    "why_device_cpu": "the device process had a core for {share:.0f}% of the time it was working",
    "why_prefill": "prefill forwards filled {share:.0f}% of the steady window",
    "m_steady_step_us": "decode step, steady window (ms)",
    "m_steady_busy_frac": "GPU busy, steady window, all stream lanes",
    "m_steady_engine_busy_frac": "GPU busy, steady window, engine stream alone",
    "m_decode_gap_us_p50": "gap between decode forwards, median (ms)",
    "note_default_prompts": "The prompts box was empty: the built-in prompts were used.",
    "note_no_chat_template": "This model has no chat template (a base model): the prompts went in "
                             "as plain text.",
    # the latency chart (serving tab)
    "latency_ttft": "Time to first token (ms)", "latency_itl": "Inter-token latency (ms)",
    "latency_tput": "Output tokens/s", "latency_rate": "request rate (req/s)",
    "latency_burst": "burst",
    "latency_title": "Latency against request rate", "latency_empty": "No serving runs to draw yet",
}

ZH: dict[str, str] = {
    "metric": "指标",
    "m_tokens_per_s": "输出 token / 秒",
    "m_decode_tokens_per_s": "解码 token / 秒",
    "m_output_tokens": "输出 token 数",
    "m_wall_s": "总耗时（秒）",
    "m_steps": "步数",
    "m_gpu_busy_frac": "GPU 忙碌比例，所有 stream 泳道合计",
    "m_engine_busy_frac": "GPU 忙碌比例，engine stream 单独",
    "m_active_busy_frac": "系统中有请求时的 GPU 忙碌比例（两条泳道合计）",
    "m_idle_us_total": "GPU 空闲总计（ms）",
    "m_idle_gap_count": "空闲段数",
    "m_mean_step_us": "平均每步时间（ms）",
    "m_mean_idle_per_step_us": "平均每步 GPU 空闲（ms）",
    "m_t_fwd_us": "T_fwd：每步前向（ms）",
    "m_t_cpu_us": "T_sched + T_post：每步 CPU（ms）",
    "m_ttft_ms_mean": "首 token 延迟均值（ms）",
    "m_itl_ms_mean": "token 间延迟（ITL）均值（ms）",
    "m_itl_ms_p99": "token 间延迟（ITL）p99（ms）",
    "m_tpot_ms_mean": "每输出 token 时间均值（ms）",
    "formula_serial": "串行一步 ≈ T_fwd + T_sched + T_post = {fwd:.2f} + {cpu:.2f} = "
                      "{total:.2f} ms",
    "formula_overlap": "重叠一步 ≈ max(T_fwd, T_sched + T_post) = max({fwd:.2f}, {cpu:.2f}) = "
                       "{best:.2f} ms",
    "formula_predicted": "预测加速比：{pred:.2f}×",
    "formula_measured": "每个解码步的实测加速比（{a}每步时间 ÷ {b}每步时间，同一稳定窗口）："
                        "{meas:.2f}×",
    "formula_whole": "整次运行的输出 token/秒（{b} ÷ {a}；含预填充、填充和收尾）：{meas:.2f}×",
    "formula_terms": "每个解码步的各项，取自{label}运行的稳定窗口（解码步中间的 80%）",
    "why_below": "{label}运行实测 {meas:.2f}×，比公式预测的 {pred:.2f}× 低 {pct:.0f}%。",
    "why_above": "{label}运行实测 {meas:.2f}×，比公式预测的 {pred:.2f}× 高 {pct:.0f}%。",
    "why_none": "本页测量的各项都解释不了这个差别（在共享的机器上，仅运行之间的波动就能让加速比变化约 "
                "±15%）。",
    "why_serial_overlapped": "{label}运行中每步有 {ms:.2f} ms 的 CPU 工作是在前向进行的同时完成的（提交"
                             "前向本身就是 CPU 工作，它在前向运行时继续进行），所以它每步用时 {step:.2f} "
                             "ms，而不是 T_fwd + T_sched + T_post = {total:.2f} ms：串行循环本来就已部分"
                             "重叠",
    "why_serial_waited": "{label}运行每步用时 {step:.2f} ms，比 T_fwd + T_sched + T_post 多 {ms:.2f} "
                         "ms：这段等待既不是前向也不是 CPU 工作（结果回传、设备的应答），重叠同样会把它"
                         "藏起来",
    "why_overlap_rest": "{label}运行每步用时 {step:.2f} ms，比它自己的前向与 CPU 工作中较长的一项"
                        "（{longer:.2f} ms）多 {ms:.2f} ms",
    "why_gap_p50": "，各次前向之间的间隔中位数为 {gap:.3f} ms",
    "why_forward": "{b}运行中每步前向用时 {ms_b:.2f} ms，而{a}运行中是 {ms_a:.2f} ms",
    "why_cpu": "{b}运行中每步 CPU 工作用时 {ms_b:.2f} ms，而公式从{a}运行取的是 {ms_a:.2f} ms",
    "profiled_note": "<b>kernel 泳道</b>：这次录制在第 {first}–{last} 步运行了 torch.profiler（步窗口"
                     "显示这些步）。启动 profiler 以及它对每个 kernel 的记录会拖慢运行，所以整体数字"
                     "不是两种循环本身的：请看 kernel 泳道，而不是加速比。在 eager 模式下小模型受限于"
                     "启动开销：前向的区间看起来是满的，而其中的 kernel 很稀疏。",
    "note_steps_profiler_step": "{steps} 步，取自 trace 中的 ProfilerStep 标记。",
    "note_steps_graph_launch": "{steps} 步，每次 CUDA Graph 启动算一步（trace 中没有 ProfilerStep "
                               "标记）。",
    "note_steps_marker": "{steps} 步，每次启动 <code>{marker}</code> 算一步：它是每次前向只运行一次的"
                         " kernel（trace 中没有 ProfilerStep 标记）。",
    "note_steps_none": "没有找到重复的步：整个 trace 作为一个窗口。",
    "note_no_cpu_lanes": "trace 中没有发起 GPU 工作的主机线程（是否用 ProfilerActivity.CPU 录制？）："
                         "只画出 GPU 泳道。",
    "note_no_tokens": "trace 中没有 token：token 数、速率和延迟都不在其中，表中略去（–）。",
    "why_measured": "各次运行测到、而公式没有计入的：",
    "why_join": "；",
    "ratio_note": "比值列按列标题所示，把一次运行中每一行的值除以另一次运行的值：对时间（每步时间、"
                  "空闲时间、TTFT、ITL），小于 1× 表示更快；对速率或比例（token/秒、GPU 忙碌比例），"
                  "大于 1× 表示更好。",
    "why_raises": "（这使实测加速比变高）",
    "why_lowers": "（这使实测加速比变低）",
    "why_end": "。",
    "why_other_load": "其他程序同时占用了本机 {cpus} 个核心的 {share:.0f}%",
    "why_device_cpu": "设备进程在工作时只有 {share:.0f}% 的时间拿到了核心",
    "why_prefill": "预填充前向占了稳定窗口的 {share:.0f}%",
    "m_steady_step_us": "解码步时间，稳定窗口（ms）",
    "m_steady_busy_frac": "GPU 忙碌比例，稳定窗口，所有 stream 泳道合计",
    "m_steady_engine_busy_frac": "GPU 忙碌比例，稳定窗口，engine stream 单独",
    "m_decode_gap_us_p50": "相邻解码前向之间的间隔，中位数（ms）",
    "note_default_prompts": "提示框为空：使用了内置提示。",
    "note_no_chat_template": "该模型没有对话模板（基础模型）：提示词按纯文本输入。",
    # the latency chart (serving tab)
    "latency_ttft": "首个 token 延迟（毫秒）", "latency_itl": "token 间延迟（毫秒）",
    "latency_tput": "每秒输出 token 数", "latency_rate": "请求速率（请求/秒）", "latency_burst": "突发",
    "latency_title": "延迟随请求速率的变化", "latency_empty": "还没有可以绘制的服务运行",
}
