"""Vector surfaces: the separate texts of one object that candidate recall embeds.

Every indexed object has its content surface (an episode's summary, an observation's text, a
derived memory's text, a thread's title and summary). An episode with a scene has up to two more:
its setting's words and its participants' words (names and descriptions). They are embedded as
their own points, never appended to the content text, so a description recalls similar occasions
without deciding who anyone is, and a content search never meets them.
"""

from __future__ import annotations

from charmem.domain._fields import ChoiceEnum
from charmem.domain.model import Episode

__all__ = ["PARTICIPANT_WORDS_SEPARATOR", "VectorSurface", "entry_key", "scene_surface_texts"]

#: What joins the participants' names and descriptions into one person-words text.
PARTICIPANT_WORDS_SEPARATOR = "\n"


class VectorSurface(ChoiceEnum):
    """Which text of an object a vector point embeds.

    ``CONTENT``: the object's own text (every indexed object). ``SETTING_WORDS``: the words of an
    episode's scene setting. ``PERSON_WORDS``: the names and descriptions of an episode's scene
    participants, joined in participant order.
    """

    CONTENT = "content"
    SETTING_WORDS = "setting_words"
    PERSON_WORDS = "person_words"


def scene_surface_texts(episode: Episode) -> dict[VectorSurface, str]:
    """The scene surfaces of an episode and the text each embeds (the rule of scene surfaces).

    ``SETTING_WORDS`` when the scene's setting has words (the words); ``PERSON_WORDS`` when any
    participant has a name or a description (each participant's name, then its description, in
    participant order, joined by :data:`PARTICIPANT_WORDS_SEPARATOR`). Participants given by id
    alone add nothing: who they are is in the graph, not in words.

    Args:
        episode: any episode.

    Returns:
        dict[VectorSurface, str]: the surfaces in ``SETTING_WORDS``, ``PERSON_WORDS`` order;
        empty without a scene.
    """
    scene = episode.scene
    if scene is None:
        return {}
    texts: dict[VectorSurface, str] = {}
    if scene.setting is not None and scene.setting.words is not None:
        texts[VectorSurface.SETTING_WORDS] = scene.setting.words
    words = [
        text
        for participant in scene.participants
        for text in (participant.name, participant.description)
        if text is not None
    ]
    if words:
        texts[VectorSurface.PERSON_WORDS] = PARTICIPANT_WORDS_SEPARATOR.join(words)
    return texts


def entry_key(memory_id: object, surface: VectorSurface) -> str:
    """How logs name one point: ``"<id>"`` for content, ``"<id>/<surface>"`` for a scene surface."""
    return str(memory_id) if surface is VectorSurface.CONTENT else f"{memory_id}/{surface.value}"
