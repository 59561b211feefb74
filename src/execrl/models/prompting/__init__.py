"""What a model is asked: a task's prompt as the text a model continues, through its chat
template or raw (`chat`), and the signature prompts that end with the function's `def` line
(`prompting`). The lowest of models' wings: it imports none of them."""
