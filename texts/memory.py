"""The KV-memory chart's sentences, English and Chinese: pages in use, cached and free, the
prefix cache's hits, retractions, and the metrics table's memory rows (merged by ``texts.strings``).
"""

from __future__ import annotations

EN: dict[str, str] = {
    "memory_none": "No KV-memory trace in this run: runs recorded before the prefix cache "
                   "existed and imported torch.profiler traces do not carry one. A live run "
                   "draws it.",
    "memory_head": "{label}: the prefix cache served {rate:.0f}% of prompt tokens ({hits:,}) · "
                   "{retractions}",
    "memory_head_no_rate": "{label}: {retractions}",
    "memory_retractions": "{n} retractions",
    "memory_retractions_one": "1 retraction",
    "memory_sub": "{total} KV pages · at most {peak} in use by requests · at least {free} free",
    "memory_axis": "KV pages",
    "mem_used": "in use by requests",
    "mem_cached": "held only by the prefix cache",
    "mem_free": "free",
    "mem_retraction": "retraction (the pool ran dry)",
    "mem_hover_used": "<b>step %{customdata[0]}</b><br>in use by requests: %{customdata[1]} "
                      "pages<extra></extra>",
    "mem_hover_cached": "held only by the prefix cache: %{customdata[2]} pages<extra></extra>",
    "mem_hover_free": "free: %{customdata[3]} of %{customdata[4]} pages<extra></extra>",
    "mem_retracted": "request {req} retracted while step {step} was built: the pool ran dry.<br>Its "
                     "computed pages go to the prefix cache, the rest come back at once (its slot "
                     "once no launched batch reads it); it resumes later",
    "hover_cached": "<br>{cached:,} of {total:,} prompt tokens from the prefix cache",
    "m_prefix_hit_rate": "prompt tokens from the prefix cache (share)",
    "m_prefix_hit_tokens": "prompt tokens from the prefix cache",
    "m_retractions": "retractions (KV pool ran dry)",
}

ZH: dict[str, str] = {
    "memory_none": "这次运行没有 KV 内存记录：前缀缓存出现之前录制的运行和导入的 torch.profiler "
                   "trace 都不带它。做一次实时运行就能画出来。",
    "memory_head": "{label}：前缀缓存提供了 {rate:.0f}% 的提示 token（{hits:,} 个）· {retractions}",
    "memory_head_no_rate": "{label}：{retractions}",
    "memory_retractions": "撤回 {n} 次",
    "memory_retractions_one": "撤回 1 次",
    "memory_sub": "共 {total} 个 KV 页 · 请求最多占用 {peak} 个 · 最少剩 {free} 个空闲",
    "memory_axis": "KV 页",
    "mem_used": "请求占用",
    "mem_cached": "只由前缀缓存持有",
    "mem_free": "空闲",
    "mem_retraction": "撤回（页池用尽）",
    "mem_hover_used": "<b>第 %{customdata[0]} 步</b><br>请求占用：%{customdata[1]} 页"
                      "<extra></extra>",
    "mem_hover_cached": "只由前缀缓存持有：%{customdata[2]} 页<extra></extra>",
    "mem_hover_free": "空闲：%{customdata[3]} / %{customdata[4]} 页<extra></extra>",
    "mem_retracted": "组第 {step} 步的批次时请求 {req} 被撤回：页池用尽了。<br>它已算好的页交给前缀"
                     "缓存，其余的立即归还（槽位等已提交的批次不再读取后才归还）；它稍后继续",
    "hover_cached": "<br>{total:,} 个提示 token 中有 {cached:,} 个来自前缀缓存",
    "m_prefix_hit_rate": "来自前缀缓存的提示 token（占比）",
    "m_prefix_hit_tokens": "来自前缀缓存的提示 token 数",
    "m_retractions": "撤回次数（KV 页池用尽）",
}
