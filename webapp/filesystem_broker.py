"""The embedded mode's broker: kombu's filesystem transport with messages written atomically.

Kombu's own writer creates `<time>_<uuid>.<queue>.msg` and then writes into it, while a
consumer moves away and reads any file of that name it lists: one listed in between is read
empty, and the JSONDecodeError stops the whole worker ("Unrecoverable error", kombu issue
#1551): the embedded mode then has no worker left, and every later job waits for ever. Here a
message is written under a name no consumer takes (`….msg.tmp`) and renamed into place, so a
listed message is always whole (a rename within one folder is atomic)."""

import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

TEMPORARY_SUFFIX = ".tmp"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        temporary = final + TEMPORARY_SUFFIX
        try:
            with open(temporary, "wb", buffering=0) as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as exc:
            try:
                os.remove(temporary)
            except OSError:
                pass
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
