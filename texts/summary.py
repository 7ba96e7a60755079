"""The run's one-line summary (the headline), the busy-machine badge, and the page's folds: what
a reader sees first after a run, and the titles of what is one click away."""

from __future__ import annotations

EN: dict[str, str] = {
    # the headline: one line after every run
    "gpu_cuda": "GPU",
    "gpu_cpu-process": "GPU (here the device process playing it)",
    "gpu_cpu-inline": "GPU (here played in the scheduler's own process)",
    "headline_faster": "<b>{gpu} idle {idle_a} → {idle_b} ms, {name} {speedup:.2f}× faster per "
                       "decode step</b>: the CPU's work now runs under the GPU's forward.",
    "headline_not_faster": "<b>{gpu} idle {idle_a} → {idle_b} ms, but {name} was not faster per "
                           "decode step ({speedup:.2f}×)</b>: the formula below says what the "
                           "runs measured.",
    "headline_busy": "<b>Not a fair comparison: {why}.</b> The runs measured {gpu} idle "
                     "{idle_a} → {idle_b} ms and {name} {speedup:.2f}× per decode step, but "
                     "their times measure the machine, not the loops: run again when it is "
                     "quieter, or, where the button under the status offers it, see the same "
                     "work recorded on a quiet machine (a browser drawing this page on the same "
                     "machine counts as another program; the page's own server does not).",
    "headline_single": "<b>{gpu} idle {idle_a} ms in {gaps}</b> ({name} alone: choose normal and "
                       "overlap to compare them).",
    "headline_also": "; {name} {speedup:.2f}×",
    "headline_no_steady": "<b>{gpu} idle {idle_a} → {idle_b} ms</b> ({name}); the runs are too "
                          "short for a per-step comparison.",
    "busy_other": "other programs used {share:.0f}% of this machine's {cpus} cores",
    "busy_device": "the device process had its core only {share:.0f}% of its working time",
    "busy_badge": "⚠ busy machine: {why}",
    # folds: one click away
    "fold_formula": "Why: the article's formula with these runs' numbers",
    "fold_all_metrics": "All metrics ({n} more rows)",
    "fold_placement": "Where the processes ran",
    "fold_more_settings": "More settings: model, batch, prompts, multi-step k, KV memory, arrivals",
    "fold_metrics_help": "How to read the numbers",
    "presets_label": "**Presets:**",
    "status_queued": "Waiting for the engine: it does one thing at a time (a run, or its "
                     "warm-up after the app starts), and this run starts when that has ended.",
    "lab_queued": "Waiting for the engine: it does one thing at a time (a run, or its warm-up "
                  "after the app starts), and this run starts when that has ended.",
    "lab_loading": "Loading the engine for the lab…",
    # the whole-run timeline: each run's GPU time added up, under its lanes
    "sum_row": "GPU time, added up",
    "sum_idle": "idle {ms} ms",
    "sum_busy": "busy {ms} ms",
    "sum_both": "◂ {idle} · {busy}",
    "sum_beside": "◂ {idle}",
    "sum_idle_name": "GPU idle, added up",
    "sum_busy_name": "GPU busy, added up",
    "hover_sum_idle": "<b>GPU idle, added up: {ms} ms</b> ({share}% of the GPU's time)<br>"
                      "every red band above, laid end to end from 0",
    "hover_sum_busy": "<b>GPU busy, added up: {ms} ms</b> ({share}% of the GPU's time)<br>"
                      "time some GPU lane was working",
    # a whole run of a few hundred steps: its idle share column by column
    "idle_row": "GPU idle over time",
    "hover_idle_column": "<b>GPU idle {share}% of the time</b><br>{a}–{b} ms",
}

ZH: dict[str, str] = {
    "gpu_cuda": "GPU",
    "gpu_cpu-process": "GPU（此处由设备进程扮演）",
    "gpu_cpu-inline": "GPU（此处在调度器自己的进程里扮演）",
    "headline_faster": "<b>{gpu} 空闲 {idle_a} → {idle_b} ms，{name}每个解码步快 {speedup:.2f}×</b>："
                       "CPU 的工作现在在 GPU 前向的同时进行。",
    "headline_not_faster": "<b>{gpu} 空闲 {idle_a} → {idle_b} ms，但{name}每个解码步并没有更快"
                           "（{speedup:.2f}×）</b>：下面的公式说明了这几次运行测到了什么。",
    "headline_busy": "<b>这次比较不可信：{why}。</b>测得 {gpu} 空闲 {idle_a} → {idle_b} ms，{name}"
                     "每个解码步 {speedup:.2f}×，但这些时间反映的是机器有多忙，而不是循环本身：请在机器"
                     "空闲一些时再运行，或者在状态行下方有按钮时，查看同一负载在空闲机器上的录制"
                     "（在同一台机器上绘制本页的浏览器也算其他程序；本页自己的服务器不算）。",
    "headline_single": "<b>{gpu} 空闲 {idle_a} ms，共 {gaps}</b>（只运行了{name}：同时选择普通和重叠"
                       "才能比较）。",
    "headline_also": "；{name} {speedup:.2f}×",
    "headline_no_steady": "<b>{gpu} 空闲 {idle_a} → {idle_b} ms</b>（{name}）；运行太短，无法逐步比较。",
    "busy_other": "其他程序占用了这台机器 {cpus} 个核心的 {share:.0f}%",
    "busy_device": "设备进程在它工作的时间里只有 {share:.0f}% 拿到了自己的核心",
    "busy_badge": "⚠ 机器繁忙：{why}",
    "fold_formula": "为什么：代入这几次运行数值的文中公式",
    "fold_all_metrics": "全部指标（另有 {n} 行）",
    "fold_placement": "各进程运行在哪里",
    "fold_more_settings": "更多设置：模型、批大小、提示、多步 k、KV 内存、请求到达",
    "fold_metrics_help": "如何读这些数字",
    "presets_label": "**预设：**",
    "status_queued": "等待引擎：它一次只做一件事（一个运行，或应用启动后的预热），"
                     "那件事结束后这个运行才开始。",
    "lab_queued": "等待引擎：它一次只做一件事（一个运行，或应用启动后的预热），"
                  "那件事结束后这个运行才开始。",
    "lab_loading": "正在为实验室加载引擎…",
    "sum_row": "GPU 时间合计",
    "sum_idle": "空闲 {ms} ms",
    "sum_busy": "忙碌 {ms} ms",
    "sum_both": "◂ {idle} · {busy}",
    "sum_beside": "◂ {idle}",
    "sum_idle_name": "GPU 空闲合计",
    "sum_busy_name": "GPU 忙碌合计",
    "hover_sum_idle": "<b>GPU 空闲合计：{ms} ms</b>（占 GPU 时间的 {share}%）<br>"
                      "上方所有红色带首尾相接，从 0 开始排开",
    "hover_sum_busy": "<b>GPU 忙碌合计：{ms} ms</b>（占 GPU 时间的 {share}%）<br>"
                      "至少一条 GPU 泳道在工作的时间",
    "idle_row": "GPU 空闲随时间",
    "hover_idle_column": "<b>GPU 有 {share}% 的时间空闲</b><br>{a}–{b} ms",
}
