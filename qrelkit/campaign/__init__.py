"""The campaign runner: one folder, one store, every stage of the judging protocol sequenced
(docs/campaign.md). A room above pooler/, dedupe/, cal/, labels/, evaluate/ and reuse/: it only
calls their public functions and keeps the state.

>>> from qrelkit.campaign import Campaign, STAGES
>>> STAGES[:4]
('validate', 'select', 'dedupe', 'pool')
"""

from qrelkit.campaign.runner import REQUIRED, STAGES, STATUS_COLUMNS, Campaign, Runner, status_table
from qrelkit.store import CAMPAIGN_SCHEMA_VERSION, CampaignStore, open_campaign_store
from qrelkit.campaign.corrections import correct_judgments, list_judgments, read_corrections
from qrelkit.campaign.door import check_folder, check_outputs, protected_paths
from qrelkit.campaign.accounts import add_account, list_accounts, revoke_account, token_hash
from qrelkit.campaign.prefs import export_preferences, make_preference_tasks, preference_status, screen_preferences

__all__ = ["Campaign", "CampaignStore", "CAMPAIGN_SCHEMA_VERSION", "REQUIRED", "Runner", "STAGES", "STATUS_COLUMNS",
           "add_account", "check_folder", "check_outputs", "correct_judgments", "export_preferences", "list_accounts", "list_judgments", "make_preference_tasks", "open_campaign_store",
           "preference_status", "protected_paths", "read_corrections", "revoke_account", "screen_preferences", "status_table", "token_hash"]
