"""Chat completions through the official `openai` client (OpenAI, or any compatible server)."""

from __future__ import annotations

from ms.llm.api import ChatAPILM


class OpenAILM(ChatAPILM):
    provider = "openai"

    def _connect(self, api_key: str) -> None:
        import openai

        self._errors = openai
        # The client's own retries are off: ours count and log every attempt the same way for all providers.
        self.client = openai.OpenAI(api_key=api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0)

    def _complete(self, messages, max_new_tokens, temperature, stop):
        response = self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=max_new_tokens, temperature=temperature,
            stop=stop or None)
        usage = response.usage
        return (response.choices[0].message.content or "",
                usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)

    def _is_transient(self, error: Exception) -> bool:
        e = self._errors
        if isinstance(error, (e.APITimeoutError, e.APIConnectionError, e.RateLimitError)):
            return True
        return isinstance(error, e.APIStatusError) and error.status_code >= 500
