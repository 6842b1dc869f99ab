"""Chat completions through the official `openai` client (OpenAI, or any compatible server)."""

from __future__ import annotations

import json

from ms.llm.api import ChatAPILM, UnusableReply, reply_text


class OpenAILM(ChatAPILM):
    provider = "openai"

    def _connect(self, api_key: str) -> None:
        import openai

        self._errors = openai
        # The client's own retries are off: ours (ms.llm.api) count and log every attempt the same way for all
        # providers, and also retry 2xx replies that hold no usable completion.
        self.client = openai.OpenAI(api_key=api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0)

    def _complete(self, messages, max_new_tokens, temperature, stop):
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_new_tokens, temperature=temperature,
                stop=stop or None)
        except json.JSONDecodeError as error:  # a 2xx reply that says it is JSON but is not
            raise UnusableReply(f"the reply is not JSON ({error})") from error
        return reply_text(response)

    def _is_transient(self, error: Exception) -> bool:
        e = self._errors
        if isinstance(error, (e.APITimeoutError, e.APIConnectionError, e.RateLimitError)):
            return True
        return isinstance(error, e.APIStatusError) and error.status_code >= 500
